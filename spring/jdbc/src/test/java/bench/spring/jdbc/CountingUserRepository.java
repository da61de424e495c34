package bench.spring.jdbc;

import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Test-only: the repository, counting its lookups (each one is one SELECT through JdbcTemplate: no ORM stands
 * between, so a lookup that sent nothing is impossible and the count is the statement count).
 */
class CountingUserRepository extends UserRepository {

    static final AtomicInteger USER_SELECTS = new AtomicInteger();

    CountingUserRepository(JdbcTemplate jdbc) {
        super(jdbc);
    }

    @Override
    public Optional<User> findById(String email) {
        USER_SELECTS.incrementAndGet();
        return super.findById(email);
    }

    @TestConfiguration
    static class Config {
        @Bean
        @Primary
        CountingUserRepository countingUserRepository(JdbcTemplate jdbc) {
            return new CountingUserRepository(jdbc);
        }
    }
}
