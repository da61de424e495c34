package bench.spring.webflux;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import io.r2dbc.spi.ConnectionFactory;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.boot.webtestclient.autoconfigure.AutoConfigureWebTestClient;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.test.web.reactive.server.WebTestClient;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code GET /?queries=N}: N lookups one after another, each reaching the database (every statement the
 * app executes is counted by a test-only DatabaseClient, and the server's {@code Com_select} must grow by
 * at least N), the row returned once; 400 {@code invalid_queries} for a bad value, after the token check.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@AutoConfigureWebTestClient
@Import(QueriesEndpointTest.CountingDatabaseClient.class)
class QueriesEndpointTest {

    /** The app's DatabaseClient (Boot backs off when one exists), counting every statement it executes. */
    @TestConfiguration(proxyBeanMethods = false)
    static class CountingDatabaseClient {

        static final AtomicInteger EXECUTED = new AtomicInteger();

        @Bean
        DatabaseClient r2dbcDatabaseClient(ConnectionFactory connectionFactory) {
            return DatabaseClient.builder()
                    .connectionFactory(connectionFactory)
                    .executeFunction(statement -> {
                        EXECUTED.incrementAndGet();
                        return statement.execute();
                    })
                    .build();
        }
    }

    @Autowired
    WebTestClient http;

    @Autowired
    DatabaseClient db;

    @LocalServerPort
    int port;

    private Map<String, Object> row;
    private String expectedBody;

    @BeforeEach
    void pickExistingUser() {
        row = db.sql("SELECT email, first, last, city, county, age FROM users ORDER BY email LIMIT 1 OFFSET 7")
                .fetch().one().block();
        assertThat(row).isNotNull();
        expectedBody = "{\"email\":\"%s\",\"first\":\"%s\",\"last\":\"%s\",\"city\":\"%s\",\"county\":\"%s\",\"age\":%d}"
                .formatted(row.get("email"), row.get("first"), row.get("last"), row.get("city"), row.get("county"),
                        ((Number) row.get("age")).intValue());
    }

    @ParameterizedTest(name = "queries={0}")
    @ValueSource(ints = {1, 2, 5, 20})
    void nLookupsEachReachTheDatabaseAndTheRowComesBackOnce(int n) {
        long selectsBefore = serverComSelect();
        CountingDatabaseClient.EXECUTED.set(0);

        http.get().uri("/?queries=" + n)
                .header(HttpHeaders.AUTHORIZATION, "Bearer " + TestTokens.valid((String) row.get("email")))
                .exchange()
                .expectStatus().isOk()
                .expectHeader().contentTypeCompatibleWith(MediaType.APPLICATION_JSON)
                .expectBody(String.class).isEqualTo(expectedBody);

        assertThat(CountingDatabaseClient.EXECUTED.get()).isEqualTo(n);
        // Other clients of the shared server can only add to the counter.
        assertThat(serverComSelect() - selectsBefore).isGreaterThanOrEqualTo(n);
    }

    @Test
    void absentMeansOneLookup() {
        CountingDatabaseClient.EXECUTED.set(0);

        http.get().uri("/")
                .header(HttpHeaders.AUTHORIZATION, "Bearer " + TestTokens.valid((String) row.get("email")))
                .exchange()
                .expectStatus().isOk()
                .expectBody(String.class).isEqualTo(expectedBody);

        assertThat(CountingDatabaseClient.EXECUTED.get()).isEqualTo(1);
    }

    @Test
    void unknownEmailWithQueriesIs404AfterEveryLookup() {
        CountingDatabaseClient.EXECUTED.set(0);

        http.get().uri("/?queries=3")
                .header(HttpHeaders.AUTHORIZATION, "Bearer " + TestTokens.valid("nobody@unknown.example.com"))
                .exchange()
                .expectStatus().isNotFound()
                .expectBody(String.class).isEqualTo("{\"error\":\"not_found\"}");

        assertThat(CountingDatabaseClient.EXECUTED.get()).isEqualTo(3);
    }

    @ParameterizedTest(name = "[{0}]")
    @ValueSource(strings = {"queries=0", "queries=21", "queries=-1", "queries=abc", "queries=1.5", "queries=",
            "queries", "queries=+5", "queries=%2B5", "queries=%205", "queries=5&queries=5", "queries=99999999999"})
    void badQueriesIs400WithoutAnyLookup(String rawQuery) throws Exception {
        CountingDatabaseClient.EXECUTED.set(0);

        // Over a plain socket, so the query string reaches the server exactly as written.
        String response = rawGet("/?" + rawQuery, TestTokens.valid((String) row.get("email")));

        assertThat(response).startsWith("HTTP/1.1 400 ");
        assertThat(response.toLowerCase()).contains("content-type: application/json");
        assertThat(response).endsWith("\r\n\r\n{\"error\":\"invalid_queries\"}");
        assertThat(CountingDatabaseClient.EXECUTED.get()).isZero();
    }

    /**
     * A request target that is not a valid URI (malformed percent-encoding) never reaches the app: Spring's
     * ReactorHttpHandlerAdapter cannot build the request's java.net.URI and answers a bare 400 itself,
     * whatever the token (Tomcat passes the raw query through, so spring-platform/-virtual answer
     * {@code invalid_queries}).
     */
    @Test
    void malformedPercentEncodingIsRefusedByTheFramework() throws Exception {
        CountingDatabaseClient.EXECUTED.set(0);

        assertThat(rawGet("/?queries=%ZZ", TestTokens.valid((String) row.get("email")))).startsWith("HTTP/1.1 400 ");
        assertThat(rawGet("/?queries=%ZZ", "not-a-token")).startsWith("HTTP/1.1 400 ");
        assertThat(CountingDatabaseClient.EXECUTED.get()).isZero();
    }

    @ParameterizedTest(name = "[{0}]")
    @ValueSource(strings = {"queries=5", "queries=0", "queries=abc", "queries=5&queries=6"})
    void invalidTokenIs401WhateverQueriesSays(String rawQuery) throws Exception {
        String response = rawGet("/?" + rawQuery, "not-a-token");

        assertThat(response).startsWith("HTTP/1.1 401 ");
        assertThat(response).endsWith("\r\n\r\n{\"error\":\"invalid_token\"}");
    }

    private long serverComSelect() {
        return Long.parseLong(db.sql("SHOW GLOBAL STATUS LIKE 'Com_select'")
                .map(r -> r.get(1, String.class)).one().block());
    }

    private String rawGet(String target, String token) throws Exception {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            OutputStream out = socket.getOutputStream();
            out.write(("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token
                    + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }
}
