package bench.quarkus.virtual;

import java.util.List;
import java.util.Map;

import jakarta.inject.Inject;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.MediaType;

import org.eclipse.microprofile.jwt.JsonWebToken;
import org.jboss.resteasy.reactive.RestResponse;

import io.quarkus.security.Authenticated;
import io.smallrye.common.annotation.RunOnVirtualThread;
import io.vertx.core.http.HttpServerRequest;

@Path("/")
@Authenticated
public class UserResource {

    private static final Map<String, String> NOT_FOUND = Map.of("error", "not_found");
    private static final Map<String, String> INVALID_QUERIES = Map.of("error", "invalid_queries");

    private static final Map<String, String> INVALID_CALLS = Map.of("error", "invalid_calls");
    private static final Map<String, String> INVALID_MODE = Map.of("error", "invalid_mode");
    private static final Map<String, String> DOWNSTREAM = Map.of("error", "downstream");

    @Inject
    JsonWebToken jwt;

    @Inject
    Feed feed;

    /** GET /feed's body: the user's row and the K downstream answers in call order. */
    public record FeedJson(UserJson user, List<DownstreamClient.Item> items) {
    }

    /**
     * The token's user and K downstream items ({@code ?calls=K}, 1..10, default 3), fetched in parallel on
     * virtual threads ({@code ?mode=sequential}: one after another). 401 first (proactive authentication), then
     * 400, then the one lookup (404: no downstream call), then the calls: any failure or timeout is 502.
     */
    @GET
    @Path("feed")
    @Produces(MediaType.APPLICATION_JSON)
    @RunOnVirtualThread
    public RestResponse<?> feed(@Context HttpServerRequest request) {
        String email = EmailClaim.of(jwt);
        int calls = Queries.calls(request);
        if (calls == Queries.INVALID) {
            return RestResponse.status(RestResponse.Status.BAD_REQUEST, INVALID_CALLS);
        }
        int mode = Queries.mode(request);
        if (mode == Queries.INVALID) {
            return RestResponse.status(RestResponse.Status.BAD_REQUEST, INVALID_MODE);
        }
        User user = User.findById(email);
        if (user == null) {
            return RestResponse.status(RestResponse.Status.NOT_FOUND, NOT_FOUND);
        }
        try {
            return RestResponse.ok(new FeedJson(UserJson.of(user), feed.items(user.email, calls, mode == Queries.SEQUENTIAL)));
        } catch (Feed.DownstreamException e) {
            return RestResponse.status(RestResponse.Status.BAD_GATEWAY, DOWNSTREAM);
        }
    }

    /**
     * The token was verified before this runs (proactive authentication), so a bad token is a 401 whatever
     * {@code queries} says; then {@code queries} lookups of the token's user, one after the other, each a
     * blocking call on this virtual thread.
     */
    @GET
    @Produces(MediaType.APPLICATION_JSON)
    @RunOnVirtualThread
    public RestResponse<?> user(@Context HttpServerRequest request) {
        String email = EmailClaim.of(jwt);
        int n = Queries.of(request);
        if (n == Queries.INVALID) {
            return RestResponse.status(RestResponse.Status.BAD_REQUEST, INVALID_QUERIES);
        }
        User user = User.findById(email);
        for (int i = 1; i < n; i++) {
            // every lookup must reach the database: without clear() the request's persistence context
            // (Hibernate's first-level cache) would answer lookups 2..n from memory
            User.getEntityManager().clear();
            user = User.findById(email);
        }
        return user == null
                ? RestResponse.status(RestResponse.Status.NOT_FOUND, NOT_FOUND)
                : RestResponse.ok(UserJson.of(user));
    }
}
