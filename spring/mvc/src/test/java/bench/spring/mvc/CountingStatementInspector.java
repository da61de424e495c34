package bench.spring.mvc;

import java.util.concurrent.atomic.AtomicInteger;

import org.hibernate.resource.jdbc.spi.StatementInspector;

/**
 * Test-only: counts the SQL statements Hibernate sends to the driver (a lookup served from a
 * persistence context would send none). Registered through
 * {@code spring.jpa.properties.hibernate.session_factory.statement_inspector}.
 */
public class CountingStatementInspector implements StatementInspector {

    static final AtomicInteger USER_SELECTS = new AtomicInteger();

    @Override
    public String inspect(String sql) {
        if (sql.regionMatches(true, 0, "select", 0, 6) && sql.contains("users")) {
            USER_SELECTS.incrementAndGet();
        }
        return sql;
    }
}
