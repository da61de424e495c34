-- The users table of the seed article: one row per user, looked up by primary key.
-- The harness (harness/db.py, ensure_exact_match) then gives `email` the server's exact-match (binary,
-- NO PAD) collation: a token's email finds a row only when it is spelled exactly as stored.
CREATE TABLE IF NOT EXISTS users (
  email  VARCHAR(255) NOT NULL PRIMARY KEY,
  first  VARCHAR(255) NOT NULL,
  last   VARCHAR(255) NOT NULL,
  city   VARCHAR(255) NOT NULL,
  county VARCHAR(255) NOT NULL,
  age    INT NOT NULL
) DEFAULT CHARSET = utf8mb4;
