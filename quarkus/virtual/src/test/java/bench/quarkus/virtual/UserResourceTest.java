package bench.quarkus.virtual;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.is;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;

import javax.sql.DataSource;

import jakarta.inject.Inject;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;

/** Runs against the real database at the DB_* defaults (no Dev Services, no mocks). */
@QuarkusTest
class UserResourceTest {

    @Inject
    DataSource dataSource;

    String email;
    String first;
    String last;
    String city;
    String county;
    int age;

    @BeforeEach
    void pickRealUser() throws Exception {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(
                        "SELECT email, first, last, city, county, age FROM users ORDER BY RAND() LIMIT 1")) {
            assertTrue(rs.next(), "the users table is empty");
            email = rs.getString(1);
            first = rs.getString(2);
            last = rs.getString(3);
            city = rs.getString(4);
            county = rs.getString(5);
            age = rs.getInt(6);
        }
    }

    @Test
    void validTokenReturnsTheRowInOrder() {
        Response r = given().header("Authorization", "Bearer " + Tokens.valid(email)).get("/");
        r.then().statusCode(200).contentType(startsWith("application/json"));
        String expected = "{\"email\":\"" + email + "\",\"first\":\"" + first + "\",\"last\":\"" + last
                + "\",\"city\":\"" + city + "\",\"county\":\"" + county + "\",\"age\":" + age + "}";
        assertEquals(expected, r.asString());
    }

    @Test
    void lowercaseSchemeIsAccepted() {
        given().header("Authorization", "bearer " + Tokens.valid(email)).get("/")
                .then().statusCode(200).body("email", equalTo(email));
    }

    @Test
    void unknownEmailIs404() {
        given().header("Authorization", "Bearer " + Tokens.valid("nobody.here0@example.org")).get("/")
                .then().statusCode(404).contentType(startsWith("application/json"))
                .body(equalTo("{\"error\":\"not_found\"}"));
    }

    @Test
    void sqlLookingEmailIs404() {
        given().header("Authorization", "Bearer " + Tokens.valid("' OR '1'='1")).get("/")
                .then().statusCode(404).body("error", is("not_found"));
    }

    @Test
    void missingHeaderIs401() {
        assertInvalidToken(given().get("/"));
    }

    @Test
    void wrongSchemeIs401() {
        assertInvalidToken(given().header("Authorization", "Basic " + Tokens.valid(email)).get("/"));
    }

    @Test
    void emptyAndGarbageTokensAre401() {
        assertInvalidToken(given().header("Authorization", "Bearer ").get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer not.a.jwt").get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer %%%.***.!!!").get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + "A".repeat(16 * 1024)).get("/"));
    }

    @Test
    void badSignatureAndWrongAlgorithmsAre401() {
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.wrongSecret(email)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs512(email)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs384(email)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.algNone(email)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer "
                + Tokens.withHeader("{\"alg\":\"RS256\",\"typ\":\"JWT\"}", Tokens.claims(email))).get("/"));
    }

    @Test
    void timeClaimsAreEnforced() {
        long now = Tokens.now();
        String expired = "{\"email\":\"" + email + "\",\"iat\":" + (now - 7200) + ",\"exp\":" + (now - 3600) + "}";
        String noExp = "{\"email\":\"" + email + "\",\"iat\":" + now + "}";
        String future = "{\"email\":\"" + email + "\",\"iat\":" + now + ",\"nbf\":" + (now + 3600)
                + ",\"exp\":" + (now + 7200) + "}";
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs256(expired)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs256(noExp)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs256(future)).get("/"));
    }

    @Test
    void emailMustBeAString() {
        long now = Tokens.now();
        String noEmail = "{\"iat\":" + now + ",\"exp\":" + (now + 300) + "}";
        String numeric = "{\"email\":12345,\"iat\":" + now + ",\"exp\":" + (now + 300) + "}";
        String array = "{\"email\":[\"" + email + "\"],\"iat\":" + now + ",\"exp\":" + (now + 300) + "}";
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs256(noEmail)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs256(numeric)).get("/"));
        assertInvalidToken(given().header("Authorization", "Bearer " + Tokens.hs256(array)).get("/"));
        // the same hand-made path does succeed with a string email
        given().header("Authorization", "Bearer " + Tokens.hs256(Tokens.claims(email))).get("/")
                .then().statusCode(200).body("email", equalTo(email));
    }

    private static void assertInvalidToken(Response r) {
        r.then().statusCode(401)
                .contentType(startsWith("application/json"))
                .header("WWW-Authenticate", startsWith("Bearer"))
                .body(equalTo("{\"error\":\"invalid_token\"}"));
        assertEquals(1, r.headers().getValues("WWW-Authenticate").size(), "one Bearer challenge");
    }
}
