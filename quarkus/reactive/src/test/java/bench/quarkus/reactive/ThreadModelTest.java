package bench.quarkus.reactive;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;

/** quarkus-reactive must run its endpoint (and so start the Hibernate Reactive lookup) on a Vert.x event loop. */
@QuarkusTest
class ThreadModelTest {

    @Test
    void endpointRunsOnTheEventLoop() {
        Response response = given().header("Authorization", "Bearer " + Tokens.valid("nobody.thread0@example.org"))
                .header("X-Probe", "lookup").get("/");
        ThreadProbe.Seen seen = ThreadProbe.REQUESTS.get("lookup");
        assertNotNull(seen, "the probe saw no request");
        assertTrue(seen.eventLoop() && seen.thread().startsWith("vert.x-eventloop-thread-"),
                "the endpoint ran on " + seen.thread() + ", not on an event loop");
        response.then().statusCode(404);
    }
}
