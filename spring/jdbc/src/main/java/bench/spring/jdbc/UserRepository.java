package bench.spring.jdbc;

import java.util.Optional;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.RowMapper;
import org.springframework.stereotype.Repository;

/**
 * The lookup on {@link JdbcTemplate}, as Spring's "Data Access with JDBC" chapter shows it: one statement, the row
 * mapped by hand, no ORM and no transaction (auto-commit, so nothing but the SELECT reaches the server).
 */
@Repository
public class UserRepository {

    private static final String BY_EMAIL = "SELECT email, first, last, city, county, age FROM users WHERE email = ?";

    private static final RowMapper<User> ROW = (rs, n) -> new User(rs.getString("email"), rs.getString("first"),
            rs.getString("last"), rs.getString("city"), rs.getString("county"), rs.getObject("age", Integer.class));

    private final JdbcTemplate jdbc;

    public UserRepository(JdbcTemplate jdbc) {
        this.jdbc = jdbc;
    }

    public Optional<User> findById(String email) {
        return jdbc.query(BY_EMAIL, ROW, email).stream().findFirst();
    }
}
