package bench.spring.webflux;

import java.util.concurrent.atomic.AtomicReference;

import io.netty.util.concurrent.FastThreadLocalThread;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.webtestclient.autoconfigure.AutoConfigureWebTestClient;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpHeaders;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.server.WebFilter;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Proves the name: {@code GET /} is handled on a Reactor Netty event-loop thread (a platform
 * {@code reactor-http-epoll-*} thread), not on a virtual or worker thread. A test-only WebFilter records
 * the thread; the production endpoint is unchanged.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@AutoConfigureWebTestClient
@Import(ThreadModelTest.RecordHandlingThread.class)
class ThreadModelTest {

    @TestConfiguration(proxyBeanMethods = false)
    static class RecordHandlingThread {

        final AtomicReference<Thread> lastThread = new AtomicReference<>();

        @Bean
        WebFilter recordHandlingThread() {
            return (exchange, chain) -> {
                lastThread.set(Thread.currentThread());
                return chain.filter(exchange);
            };
        }
    }

    @Autowired
    WebTestClient http;

    @Autowired
    DatabaseClient db;

    @Autowired
    RecordHandlingThread recorder;

    @Test
    void requestRunsOnANettyEventLoopThread() {
        String email = db.sql("SELECT email FROM users LIMIT 1").map(row -> row.get("email", String.class)).one().block();
        recorder.lastThread.set(null);

        http.get().uri("/")
                .header(HttpHeaders.AUTHORIZATION, "Bearer " + TestTokens.valid(email))
                .exchange()
                .expectStatus().isOk();

        Thread thread = recorder.lastThread.get();
        assertThat(thread).as("no request reached the recording filter").isNotNull();
        assertThat(thread.isVirtual()).as("%s is virtual", thread).isFalse();
        assertThat(thread).as("%s is not a Netty thread", thread).isInstanceOf(FastThreadLocalThread.class);
        // reactor-http-epoll-N in the app ("webflux-http-*" under Boot's test-scoped Reactor resources)
        assertThat(thread.getName()).matches("(reactor|webflux)-http-(nio|epoll|io_uring|kqueue)-\\d+");
    }
}
