package bench.spring.jdbc;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.atomic.AtomicReference;

import jakarta.servlet.Filter;

import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.context.annotation.Bean;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Test-only: a servlet filter that records the thread handling each request, so the thread-model
 * tests can look at the thread that runs {@code GET /} without touching the production endpoint.
 */
@TestConfiguration(proxyBeanMethods = false)
class HandlingThreadRecorder {

    private final AtomicReference<Thread> lastThread = new AtomicReference<>();

    @Bean
    Filter recordHandlingThread() {
        return (request, response, chain) -> {
            lastThread.set(Thread.currentThread());
            chain.doFilter(request, response);
        };
    }

    /** Sends one valid {@code GET /} and returns the thread that handled it. */
    Thread handle(int port, String email) throws Exception {
        lastThread.set(null);
        HttpResponse<String> response = HttpClient.newHttpClient().send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/"))
                        .header("Authorization", "Bearer " + TestTokens.valid(email))
                        .build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        Thread thread = lastThread.get();
        assertThat(thread).as("no request reached the recording filter").isNotNull();
        return thread;
    }
}
