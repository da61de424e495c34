package bench.spring.webflux;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.r2dbc.core.DatabaseClient;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Many sequential requests on one HTTP/1.1 keep-alive connection must all be answered. With Reactor
 * Netty 1.3.6 (Boot 4.1.0's default) about 1 in 200 hung forever: a request that arrived before the
 * previous response's operations had terminated was buffered and never read (reactor-netty#4361).
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class KeepAliveTest {

    private static final int REQUESTS = 1000;

    @LocalServerPort
    int port;

    @Autowired
    DatabaseClient db;

    @Test
    void sequentialKeepAliveRequestsAreAllAnswered() throws Exception {
        List<String> emails = db.sql("SELECT email FROM users LIMIT 100")
                .map(row -> row.get("email", String.class)).all().collectList().block();
        assertThat(emails).hasSize(100);
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

        for (int i = 0; i < REQUESTS; i++) {
            HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/"))
                    .header("Authorization", "Bearer " + TestTokens.valid(emails.get(i % emails.size())))
                    .timeout(Duration.ofSeconds(5))
                    .build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            assertThat(response.statusCode()).as("request %d", i).isEqualTo(200);
        }
    }
}
