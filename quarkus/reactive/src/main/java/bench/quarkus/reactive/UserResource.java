package bench.quarkus.reactive;

import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;

import jakarta.inject.Inject;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.MediaType;

import org.eclipse.microprofile.jwt.JsonWebToken;
import org.hibernate.reactive.mutiny.Mutiny;
import org.eclipse.microprofile.rest.client.inject.RestClient;
import org.jboss.resteasy.reactive.RestResponse;

import io.quarkus.hibernate.reactive.panache.Panache;
import io.quarkus.hibernate.reactive.panache.common.WithSession;
import io.quarkus.security.Authenticated;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;

/** Returns a Uni, so Quarkus REST runs it on the Vert.x event loop; Hibernate Reactive never blocks it. */
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

    @RestClient
    DownstreamClient downstream;

    /** GET /feed's body: the user's row and the K downstream answers in call order. */
    public record FeedJson(UserJson user, List<DownstreamClient.Item> items) {
    }

    /**
     * The token's user and K downstream items ({@code ?calls=K}, 1..10, default 3): K {@code Uni}s joined with
     * {@code Uni.join().all(..).andFailFast()} (all subscribed at once, results in call order, the first failure
     * cancels the others); {@code ?mode=sequential} concatenates them instead. The lookup runs in its own
     * session ({@code Panache.withSession}), so its connection goes back to the pool before the downstream calls
     * (with {@code @WithSession} on the method the session, and its connection, would be held until the response).
     */
    @GET
    @Path("feed")
    @Produces(MediaType.APPLICATION_JSON)
    public Uni<RestResponse<?>> feed(@Context HttpServerRequest request) {
        String email = EmailClaim.of(jwt);
        int calls = Queries.calls(request);
        if (calls == Queries.INVALID) {
            return Uni.createFrom().item(RestResponse.status(RestResponse.Status.BAD_REQUEST, INVALID_CALLS));
        }
        int mode = Queries.mode(request);
        if (mode == Queries.INVALID) {
            return Uni.createFrom().item(RestResponse.status(RestResponse.Status.BAD_REQUEST, INVALID_MODE));
        }
        return Panache.withSession(() -> User.<User> findById(email)).chain(user -> {
            if (user == null) {
                return Uni.createFrom().item(RestResponse.status(RestResponse.Status.NOT_FOUND, NOT_FOUND));
            }
            Uni<List<DownstreamClient.Item>> items = mode == Queries.SEQUENTIAL
                    ? Multi.createFrom().range(0, calls)
                            .onItem().transformToUniAndConcatenate(i -> downstream.item(user.email, i))
                            .collect().asList()
                    : Uni.join().all(IntStream.range(0, calls).mapToObj(i -> downstream.item(user.email, i)).toList())
                            .andFailFast();
            return items.<RestResponse<?>> map(list -> RestResponse.ok(new FeedJson(UserJson.of(user), list)))
                    .onFailure().recoverWithItem(e -> RestResponse.status(RestResponse.Status.BAD_GATEWAY, DOWNSTREAM));
        });
    }

    /**
     * The token was verified before this runs (proactive authentication), so a bad token is a 401 whatever
     * {@code queries} says; then {@code queries} lookups of the token's user as a sequential chain of Uni
     * steps, each started when the previous one has completed.
     */
    @GET
    @Produces(MediaType.APPLICATION_JSON)
    @WithSession
    public Uni<RestResponse<?>> user(@Context HttpServerRequest request) {
        String email = EmailClaim.of(jwt);
        int n = Queries.of(request);
        if (n == Queries.INVALID) {
            return Uni.createFrom().item(RestResponse.status(RestResponse.Status.BAD_REQUEST, INVALID_QUERIES));
        }
        Uni<User> lookups = User.findById(email);
        for (int i = 1; i < n; i++) {
            // every lookup must reach the database: without clear() the session's persistence context
            // (Hibernate's first-level cache) would answer lookups 2..n from memory
            lookups = lookups.chain(() -> Panache.getSession().invoke(Mutiny.Session::clear))
                    .chain(() -> User.<User> findById(email));
        }
        return lookups.map(user -> user == null
                ? RestResponse.status(RestResponse.Status.NOT_FOUND, NOT_FOUND)
                : RestResponse.ok(UserJson.of(user)));
    }
}
