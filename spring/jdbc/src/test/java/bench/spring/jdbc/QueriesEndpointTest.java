package bench.spring.jdbc;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code GET /?queries=N}: N lookups one after another, each reaching the database (counted at the repository
 * and at the server's {@code Com_select}), the row
 * returned once; 400 {@code invalid_queries} for a bad value, after the token check.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@Import(CountingUserRepository.Config.class)
class QueriesEndpointTest {

    private final HttpClient http = HttpClient.newHttpClient();

    @LocalServerPort
    int port;

    @Autowired
    JdbcTemplate jdbc;

    private Map<String, Object> row;
    private String expectedBody;

    @BeforeEach
    void pickExistingUser() {
        row = jdbc.queryForMap("SELECT email, first, last, city, county, age FROM users ORDER BY email LIMIT 1 OFFSET 7");
        expectedBody = "{\"email\":\"%s\",\"first\":\"%s\",\"last\":\"%s\",\"city\":\"%s\",\"county\":\"%s\",\"age\":%d}"
                .formatted(row.get("email"), row.get("first"), row.get("last"), row.get("city"), row.get("county"),
                        ((Number) row.get("age")).intValue());
    }

    @ParameterizedTest(name = "queries={0}")
    @ValueSource(ints = {1, 2, 5, 20})
    void nLookupsEachReachTheDatabaseAndTheRowComesBackOnce(int n) throws Exception {
        long selectsBefore = serverComSelect();
        CountingUserRepository.USER_SELECTS.set(0);

        HttpResponse<String> response = get("/?queries=" + n, TestTokens.valid((String) row.get("email")));

        assertThat(response.statusCode()).isEqualTo(200);
        assertThat(response.headers().firstValue("Content-Type")).hasValueSatisfying(
                type -> assertThat(type).startsWith("application/json"));
        assertThat(response.body()).isEqualTo(expectedBody);
        assertThat(CountingUserRepository.USER_SELECTS.get()).isEqualTo(n);
        // Other clients of the shared server can only add to the counter.
        assertThat(serverComSelect() - selectsBefore).isGreaterThanOrEqualTo(n);
    }

    @Test
    void absentMeansOneLookup() throws Exception {
        CountingUserRepository.USER_SELECTS.set(0);

        HttpResponse<String> response = get("/", TestTokens.valid((String) row.get("email")));

        assertThat(response.statusCode()).isEqualTo(200);
        assertThat(response.body()).isEqualTo(expectedBody);
        assertThat(CountingUserRepository.USER_SELECTS.get()).isEqualTo(1);
    }

    @Test
    void unknownEmailWithQueriesIs404AfterEveryLookup() throws Exception {
        CountingUserRepository.USER_SELECTS.set(0);

        HttpResponse<String> response = get("/?queries=3", TestTokens.valid("nobody@unknown.example.com"));

        assertThat(response.statusCode()).isEqualTo(404);
        assertThat(response.body()).isEqualTo("{\"error\":\"not_found\"}");
        assertThat(CountingUserRepository.USER_SELECTS.get()).isEqualTo(3);
    }

    @ParameterizedTest(name = "[{0}]")
    @ValueSource(strings = {"queries=0", "queries=21", "queries=-1", "queries=abc", "queries=1.5", "queries=",
            "queries", "queries=+5", "queries=%2B5", "queries=%205", "queries=5&queries=5", "queries=99999999999"})
    void badQueriesIs400WithoutAnyLookup(String rawQuery) throws Exception {
        CountingUserRepository.USER_SELECTS.set(0);

        HttpResponse<String> response = get("/?" + rawQuery, TestTokens.valid((String) row.get("email")));

        assertThat(response.statusCode()).isEqualTo(400);
        assertThat(response.headers().firstValue("Content-Type")).hasValueSatisfying(
                type -> assertThat(type).startsWith("application/json"));
        assertThat(response.body()).isEqualTo("{\"error\":\"invalid_queries\"}");
        assertThat(CountingUserRepository.USER_SELECTS.get()).isZero();
    }

    @Test
    void malformedPercentEncodingIs400() throws Exception {
        // java.net.URI refuses "%ZZ", so this one goes over a plain socket.
        String response = rawGet("/?queries=%ZZ", TestTokens.valid((String) row.get("email")));

        assertThat(response).startsWith("HTTP/1.1 400 ");
        assertThat(response).contains("{\"error\":\"invalid_queries\"}");
    }

    @ParameterizedTest(name = "[{0}]")
    @ValueSource(strings = {"queries=5", "queries=0", "queries=abc", "queries=5&queries=6"})
    void invalidTokenIs401WhateverQueriesSays(String rawQuery) throws Exception {
        HttpResponse<String> response = get("/?" + rawQuery, "not-a-token");

        assertThat(response.statusCode()).isEqualTo(401);
        assertThat(response.body()).isEqualTo("{\"error\":\"invalid_token\"}");
    }

    private long serverComSelect() {
        return Long.parseLong(jdbc.queryForObject("SHOW GLOBAL STATUS LIKE 'Com_select'",
                (rs, i) -> rs.getString(2)));
    }

    private HttpResponse<String> get(String pathAndQuery, String token) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + pathAndQuery))
                        .header("Authorization", "Bearer " + token).build(),
                HttpResponse.BodyHandlers.ofString());
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
