package bench.quarkus.vertx;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import io.quarkus.test.junit.QuarkusTest;

/** quarkus-vertx must run its route handler (token check, then the query) on a Vert.x event-loop thread. */
@QuarkusTest
class ThreadModelTest {

    @Test
    void handlerRunsOnTheEventLoop() {
        String authorization = "Bearer " + Tokens.valid("nobody.thread0@example.org");
        given().header("Authorization", authorization).get("/").then().statusCode(404);
        RecordingBearerTokens.Seen seen = RecordingBearerTokens.CALLS.get(authorization);
        assertNotNull(seen, "the route did not check the token");
        assertTrue(seen.eventLoop() && seen.thread().startsWith("vert.x-eventloop-thread-"),
                "the route handler ran on " + seen.thread() + ", not on an event loop");
    }
}
