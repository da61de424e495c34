package bench.quarkus.virtual;

import java.util.concurrent.atomic.AtomicReference;

import org.hibernate.resource.jdbc.spi.StatementInspector;

import io.quarkus.hibernate.orm.PersistenceUnitExtension;

/**
 * Test-only (src/test) Hibernate statement inspector: Hibernate calls it while it prepares each
 * statement, on the thread that runs the query, so it records which thread did the lookup.
 */
@PersistenceUnitExtension
public class ThreadProbe implements StatementInspector {

    static final AtomicReference<Thread> LAST_SQL_THREAD = new AtomicReference<>();

    @Override
    public String inspect(String sql) {
        if (sql.contains("users")) {
            LAST_SQL_THREAD.set(Thread.currentThread());
        }
        return sql;
    }
}
