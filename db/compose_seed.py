"""compose.yaml's db-seed: loads the schema and the 100,000 users with the harness's own code, then writes
the server's RSA public key (MySQL's caching_sha2_password) where spring-webflux's r2dbc-mysql reads it.

Runs in the bench-db-seed image (db/Dockerfile) with DB_HOST=db; KEY_FILE overrides where the key goes.
"""
import os
import sys
from contextlib import closing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness import db  # noqa: E402

KEY_FILE = Path(os.environ.get("KEY_FILE", "/run/db-keys/public_key.pem"))


def main() -> None:
    db.seed()
    with closing(db.connect()) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM users")
        count = cur.fetchone()[0]
        # MySQL only; MariaDB (compose.mariadb.yaml) has no caching_sha2_password and no such variable.
        cur.execute("SHOW GLOBAL STATUS LIKE 'Caching_sha2_password_rsa_public_key'")
        row = cur.fetchone()
        version = db.version()
    if count != db.USER_COUNT:
        sys.exit(f"db-seed: {count} users in the table, expected {db.USER_COUNT}")
    if row and row[1].strip():
        KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
        KEY_FILE.write_text(row[1])
        print(f"db-seed: wrote the server's RSA public key to {KEY_FILE}")
    print(f"db-seed: {count} users in {version}")


if __name__ == "__main__":
    main()
