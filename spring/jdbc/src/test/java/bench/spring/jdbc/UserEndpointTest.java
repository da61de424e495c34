package bench.spring.jdbc;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.jdbc.core.JdbcTemplate;

import static org.assertj.core.api.Assertions.assertThat;

/** The endpoint contract, over HTTP, against the real MariaDB at the DB_* defaults. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class UserEndpointTest {

    private final HttpClient http = HttpClient.newHttpClient();

    @LocalServerPort
    int port;

    @Autowired
    JdbcTemplate jdbc;

    private Map<String, Object> row;

    @BeforeEach
    void pickExistingUser() {
        row = jdbc.queryForMap("SELECT email, first, last, city, county, age FROM users ORDER BY email LIMIT 1");
    }

    @Test
    void validTokenReturnsTheRowWithKeysInOrder() throws Exception {
        HttpResponse<String> response = get("Bearer " + TestTokens.valid((String) row.get("email")));

        assertThat(response.statusCode()).isEqualTo(200);
        assertThat(response.headers().firstValue("Content-Type")).hasValueSatisfying(
                type -> assertThat(type).startsWith("application/json"));
        assertThat(response.body()).isEqualTo(
                "{\"email\":\"%s\",\"first\":\"%s\",\"last\":\"%s\",\"city\":\"%s\",\"county\":\"%s\",\"age\":%d}"
                        .formatted(row.get("email"), row.get("first"), row.get("last"), row.get("city"),
                                row.get("county"), ((Number) row.get("age")).intValue()));
    }

    @Test
    void schemeIsCaseInsensitive() throws Exception {
        assertThat(get("bearer " + TestTokens.valid((String) row.get("email"))).statusCode()).isEqualTo(200);
    }

    @Test
    void unknownEmailIs404() throws Exception {
        HttpResponse<String> response = get("Bearer " + TestTokens.valid("nobody@unknown.example.com"));

        assertThat(response.statusCode()).isEqualTo(404);
        assertThat(response.body()).isEqualTo("{\"error\":\"not_found\"}");
    }

    @Test
    void sqlLookingEmailIsJustAString() throws Exception {
        assertThat(get("Bearer " + TestTokens.valid("x' OR '1'='1")).statusCode()).isEqualTo(404);
    }

    static Stream<Arguments> invalidAuthorizations() {
        String email = "\"" + "terence.murphy0@example.com" + "\"";
        String valid = TestTokens.valid("terence.murphy0@example.com");
        long now = Instant.now().getEpochSecond();
        return Stream.of(
                Arguments.of("missing header", null),
                Arguments.of("Basic scheme", "Basic dXNlcjpwYXNzd29yZA=="),
                Arguments.of("empty token", "Bearer "),
                Arguments.of("token without scheme", valid),
                Arguments.of("garbage", "Bearer !!!!.@@@@.####"),
                Arguments.of("bad signature", "Bearer " + valid.substring(0, valid.length() - 4) + "AAAA"),
                Arguments.of("HS384, same secret", "Bearer " + TestTokens.hmac("HmacSHA384",
                        "{\"alg\":\"HS384\"}", TestTokens.claims(email, 3600))),
                Arguments.of("HS512, same secret", "Bearer " + TestTokens.hmac("HmacSHA512",
                        "{\"alg\":\"HS512\"}", TestTokens.claims(email, 3600))),
                Arguments.of("RS256 header, HMAC signature", "Bearer " + TestTokens.hmac("HmacSHA256",
                        "{\"alg\":\"RS256\"}", TestTokens.claims(email, 3600))),
                Arguments.of("alg none", "Bearer " + TestTokens.b64("{\"alg\":\"none\"}".getBytes(StandardCharsets.UTF_8))
                        + "." + TestTokens.b64(TestTokens.claims(email, 3600).getBytes(StandardCharsets.UTF_8)) + "."),
                Arguments.of("expired", "Bearer " + TestTokens.hs256(TestTokens.claims(email, -3600))),
                Arguments.of("nbf in the future", "Bearer " + TestTokens.hs256(
                        "{\"email\":" + email + ",\"exp\":" + (now + 7200) + ",\"nbf\":" + (now + 3600) + "}")),
                Arguments.of("missing exp", "Bearer " + TestTokens.hs256("{\"email\":" + email + ",\"iat\":" + now + "}")),
                Arguments.of("missing email", "Bearer " + TestTokens.hs256("{\"iat\":" + now + ",\"exp\":" + (now + 3600) + "}")),
                Arguments.of("numeric email", "Bearer " + TestTokens.hs256(TestTokens.claims("12345", 3600))),
                Arguments.of("list email", "Bearer " + TestTokens.hs256(TestTokens.claims("[" + email + "]", 3600))),
                Arguments.of("16 KiB token", "Bearer " + "a".repeat(16 * 1024)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("invalidAuthorizations")
    void invalidTokensGet401(String name, String authorization) throws Exception {
        HttpResponse<String> response = get(authorization);

        assertThat(response.statusCode()).isEqualTo(401);
        assertThat(response.headers().firstValue("WWW-Authenticate")).hasValueSatisfying(
                value -> assertThat(value).startsWith("Bearer"));
        assertThat(response.body()).isEqualTo("{\"error\":\"invalid_token\"}");
    }

    private HttpResponse<String> get(String authorization) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/"));
        if (authorization != null) {
            request.header("Authorization", authorization);
        }
        return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
    }
}
