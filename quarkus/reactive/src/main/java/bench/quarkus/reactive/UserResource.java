package bench.quarkus.reactive;

import java.util.Map;

import jakarta.inject.Inject;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.MediaType;

import org.eclipse.microprofile.jwt.JsonWebToken;
import org.hibernate.reactive.mutiny.Mutiny;
import org.jboss.resteasy.reactive.RestResponse;

import io.quarkus.hibernate.reactive.panache.Panache;
import io.quarkus.hibernate.reactive.panache.common.WithSession;
import io.quarkus.security.Authenticated;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;

/** Returns a Uni, so Quarkus REST runs it on the Vert.x event loop; Hibernate Reactive never blocks it. */
@Path("/")
@Authenticated
public class UserResource {

    private static final Map<String, String> NOT_FOUND = Map.of("error", "not_found");
    private static final Map<String, String> INVALID_QUERIES = Map.of("error", "invalid_queries");

    @Inject
    JsonWebToken jwt;

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
