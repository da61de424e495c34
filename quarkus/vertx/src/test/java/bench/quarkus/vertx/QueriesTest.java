package bench.quarkus.vertx;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.inject.Inject;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;
import io.restassured.specification.RequestSpecification;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowIterator;

/** GET /?queries=N against the real database: N lookups, the row once; the token before the parameter. */
@QuarkusTest
class QueriesTest {

    static final String[] INVALID = { "", "abc", "0", "21", "-1", "+5", " 5", "5 ", "1.5", "1e1", "0x5", "٥",
            "99999999999999999999999" };

    @Inject
    Pool pool;

    String email;
    String expected;

    @BeforeEach
    void pickRealUser() {
        RowIterator<Row> rows = pool.query("SELECT email, first, last, city, county, age FROM users ORDER BY RAND() LIMIT 1")
                .execute().await().indefinitely().iterator();
        assertTrue(rows.hasNext(), "the users table is empty");
        Row row = rows.next();
        email = row.getString("email");
        expected = "{\"email\":\"" + email + "\",\"first\":\"" + row.getString("first") + "\",\"last\":\""
                + row.getString("last") + "\",\"city\":\"" + row.getString("city") + "\",\"county\":\""
                + row.getString("county") + "\",\"age\":" + row.getInteger("age") + "}";
    }

    RequestSpecification as(String who) {
        return given().urlEncodingEnabled(true).header("Authorization", "Bearer " + Tokens.valid(who));
    }

    @Test
    void validCountsReturnTheRowOnce() {
        for (String q : new String[] { "1", "2", "5", "05", "20" }) {
            Response r = as(email).queryParam("queries", q).get("/");
            r.then().statusCode(200).contentType(startsWith("application/json"));
            assertEquals(expected, r.asString(), "queries=" + q);
        }
        Response absent = as(email).get("/");
        absent.then().statusCode(200);
        assertEquals(expected, absent.asString());
    }

    @Test
    void invalidCountsAre400() throws Exception {
        for (String q : INVALID) {
            assertInvalidQueries(as(email).queryParam("queries", q).get("/"), q);
        }
        assertInvalidQueries(as(email).queryParam("queries", "2", "2").get("/"), "repeated");
        assertInvalidQueries(as(email).queryParam("queries", "2", "3").get("/"), "repeated, different");
        // a name without "=" is an empty value
        assertInvalidQueries(as(email).urlEncodingEnabled(false).get("/?queries"), "no value");
        assertInvalidQueries(as(email).urlEncodingEnabled(false).get("/?queries="), "empty value");
        // a query string that is not valid percent-encoding is refused by Vert.x Web's router before any
        // handler runs (400, no body): a malformed request target, not a queries value
        assertEquals(400, RawHttp.status("/?queries=%zz", "Bearer " + Tokens.valid(email)));
    }

    @Test
    void theTokenIsCheckedFirst() {
        for (String q : new String[] { "abc", "0", "21", "", "5" }) {
            given().queryParam("queries", q).get("/").then().statusCode(401)
                    .body(equalTo("{\"error\":\"invalid_token\"}"));
            given().header("Authorization", "Bearer " + Tokens.wrongSecret(email)).queryParam("queries", q).get("/")
                    .then().statusCode(401).body(equalTo("{\"error\":\"invalid_token\"}"));
        }
    }

    @Test
    void unknownEmailIs404WhateverTheCount() {
        as("nobody.queries0@example.org").queryParam("queries", "3").get("/")
                .then().statusCode(404).body(equalTo("{\"error\":\"not_found\"}"));
    }

    /** Every lookup reaches the server: no first-level cache answers lookups 2..N. */
    @Test
    void eachLookupIsAStatementAtTheServer() {
        as(email).queryParam("queries", "20").get("/").then().statusCode(200); // warm
        long before = comSelect();
        as(email).queryParam("queries", "20").get("/").then().statusCode(200);
        long after = comSelect();
        // the server's counter is global: other clients can only add to it
        assertTrue(after - before >= 20, (after - before) + " SELECTs for queries=20");
    }

    long comSelect() {
        RowIterator<Row> rows = pool.query("SHOW GLOBAL STATUS LIKE 'Com_select'").execute().await().indefinitely()
                .iterator();
        assertTrue(rows.hasNext());
        return Long.parseLong(rows.next().getString(1));
    }

    static void assertInvalidQueries(Response r, String what) {
        r.then().statusCode(400).contentType(startsWith("application/json"))
                .body(equalTo("{\"error\":\"invalid_queries\"}"));
    }
}
