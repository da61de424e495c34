package bench.quarkus.reactive;

import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.QueryParam;
import jakarta.ws.rs.core.MediaType;

import org.eclipse.microprofile.rest.client.inject.RegisterRestClient;

import io.smallrye.mutiny.Uni;

/**
 * GET /feed's downstream, a Quarkus REST client returning {@code Uni} (non-blocking: the call is sent on the
 * Vert.x event loop); {@code quarkus.rest-client.downstream.*}: url, timeouts, and the connection pool at its
 * default.
 */
@RegisterRestClient(configKey = "downstream")
@Path("/item")
public interface DownstreamClient {

    /** One downstream answer, {@code {"email":..,"i":..}}, re-serialised in this order. */
    record Item(String email, int i) {
    }

    @GET
    @Produces(MediaType.APPLICATION_JSON)
    Uni<Item> item(@QueryParam("email") String email, @QueryParam("i") int i);
}
