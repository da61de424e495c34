package bench.spring.webflux;

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
import org.springframework.boot.webtestclient.autoconfigure.AutoConfigureWebTestClient;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.test.web.reactive.server.WebTestClient;

import static org.assertj.core.api.Assertions.assertThat;

/** The endpoint contract, over HTTP, against the real MariaDB at the DB_* defaults. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@AutoConfigureWebTestClient
class UserEndpointTest {

    @Autowired
    WebTestClient http;

    @Autowired
    DatabaseClient db;

    private Map<String, Object> row;

    @BeforeEach
    void pickExistingUser() {
        row = db.sql("SELECT email, first, last, city, county, age FROM users ORDER BY email LIMIT 1")
                .fetch().one().block();
        assertThat(row).isNotNull();
    }

    @Test
    void validTokenReturnsTheRowWithKeysInOrder() {
        http.get().uri("/")
                .header(HttpHeaders.AUTHORIZATION, "Bearer " + TestTokens.valid((String) row.get("email")))
                .exchange()
                .expectStatus().isOk()
                .expectHeader().contentTypeCompatibleWith(MediaType.APPLICATION_JSON)
                .expectBody(String.class).isEqualTo(
                        "{\"email\":\"%s\",\"first\":\"%s\",\"last\":\"%s\",\"city\":\"%s\",\"county\":\"%s\",\"age\":%d}"
                                .formatted(row.get("email"), row.get("first"), row.get("last"), row.get("city"),
                                        row.get("county"), ((Number) row.get("age")).intValue()));
    }

    @Test
    void schemeIsCaseInsensitive() {
        http.get().uri("/")
                .header(HttpHeaders.AUTHORIZATION, "bearer " + TestTokens.valid((String) row.get("email")))
                .exchange()
                .expectStatus().isOk();
    }

    @Test
    void unknownEmailIs404() {
        http.get().uri("/")
                .header(HttpHeaders.AUTHORIZATION, "Bearer " + TestTokens.valid("nobody@unknown.example.com"))
                .exchange()
                .expectStatus().isNotFound()
                .expectHeader().contentTypeCompatibleWith(MediaType.APPLICATION_JSON)
                .expectBody(String.class).isEqualTo("{\"error\":\"not_found\"}");
    }

    @Test
    void sqlLookingEmailIsJustAString() {
        http.get().uri("/")
                .header(HttpHeaders.AUTHORIZATION, "Bearer " + TestTokens.valid("x' OR '1'='1"))
                .exchange()
                .expectStatus().isNotFound();
    }

    static Stream<Arguments> invalidAuthorizations() {
        String email = "\"terence.murphy0@example.com\"";
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
    void invalidTokensGet401(String name, String authorization) {
        WebTestClient.RequestHeadersSpec<?> request = http.get().uri("/");
        if (authorization != null) {
            request = request.header(HttpHeaders.AUTHORIZATION, authorization);
        }
        request.exchange()
                .expectStatus().isUnauthorized()
                .expectHeader().value(HttpHeaders.WWW_AUTHENTICATE, value -> assertThat(value).startsWith("Bearer"))
                .expectHeader().contentTypeCompatibleWith(MediaType.APPLICATION_JSON)
                .expectBody(String.class).isEqualTo("{\"error\":\"invalid_token\"}");
    }
}
