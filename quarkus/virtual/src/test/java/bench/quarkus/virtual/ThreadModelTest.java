package bench.quarkus.virtual;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import io.quarkus.test.junit.QuarkusTest;

/** quarkus-virtual must run the resource method, and so the JDBC lookup, on a virtual thread. */
@QuarkusTest
class ThreadModelTest {

    @Test
    void lookupRunsOnAVirtualThread() {
        ThreadProbe.LAST_SQL_THREAD.set(null);
        given().header("Authorization", "Bearer " + Tokens.valid("nobody.thread0@example.org")).get("/")
                .then().statusCode(404);
        Thread sql = ThreadProbe.LAST_SQL_THREAD.get();
        assertNotNull(sql, "no SQL ran for the request");
        assertTrue(sql.isVirtual(), "the lookup ran on " + sql + ", not on a virtual thread");
    }
}
