package bench.spring.webflux;

import java.util.ArrayList;
import java.util.List;

import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryOptions;
import io.r2dbc.spi.Option;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.r2dbc.OptionsCapableConnectionFactory;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.r2dbc.core.DatabaseClient;

import static org.assertj.core.api.Assertions.assertThat;

/** The r2dbc-mysql options the app sets, and where its connections run. */
class R2dbcConfigurationTest {

    private static final String HTTP_LOOP = "(reactor|webflux)-http-(nio|epoll|io_uring|kqueue)-\\d+";

    private static String anyEmail(DatabaseClient db) {
        return db.sql("SELECT email FROM users LIMIT 1").map(row -> row.get("email", String.class)).one().block();
    }

    /**
     * The threads that emit the row of 32 lookups: the event loop of the connection that read it, or, when
     * the caller's request races the row into the driver's queue, the calling thread ("main").
     */
    private static List<String> threadsDeliveringRows(UserRepository users, String email) {
        List<String> threads = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            threads.add(users.findById(email).map(user -> Thread.currentThread().getName()).block());
        }
        return threads;
    }

    @Nested
    @SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
    class Defaults {

        @Autowired
        ConnectionFactory connectionFactory;

        @Autowired
        UserRepository users;

        @Autowired
        DatabaseClient db;

        @Test
        void driverOptions() {
            ConnectionFactoryOptions options = OptionsCapableConnectionFactory.unwrapFrom(connectionFactory).getOptions();

            assertThat(options.getValue(Option.valueOf("tcpNoDelay"))).hasToString("true");
            assertThat(options.getValue(Option.valueOf("useServerPrepareStatement"))).hasToString("false");
        }

        @Test
        void rowsAreReadOnTheDriversOwnEventLoops() {
            // measured: sharing the HTTP server's loops (r2dbc-mysql's loopResources option) cost more CPU per
            // request here, so the driver keeps Reactor Netty's default TCP resources
            List<String> threads = threadsDeliveringRows(users, anyEmail(db));

            assertThat(threads).anyMatch(name -> name.startsWith("reactor-tcp-"));
            assertThat(threads).noneMatch(name -> name.matches(HTTP_LOOP));
        }
    }

    @Nested
    @SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
            "spring.r2dbc.properties.tcpNoDelay=false"})
    class Overridden {

        @Autowired
        ConnectionFactory connectionFactory;

        @Test
        void driverDefaults() {
            ConnectionFactoryOptions options = OptionsCapableConnectionFactory.unwrapFrom(connectionFactory).getOptions();

            assertThat(options.getValue(Option.valueOf("tcpNoDelay"))).hasToString("false");
        }
    }
}
