package bench.quarkus.virtual;

import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.QueryParam;
import jakarta.ws.rs.core.MediaType;

import org.eclipse.microprofile.rest.client.inject.RegisterRestClient;

/**
 * GET /feed's downstream, a Quarkus REST client ({@code quarkus.rest-client.downstream.*}: url, timeouts, and the
 * connection pool at its default). A blocking call: made from a virtual thread, it parks that thread.
 */
@RegisterRestClient(configKey = "downstream")
@Path("/item")
public interface DownstreamClient {

    /** One downstream answer, {@code {"email":..,"i":..}}, re-serialised in this order. */
    record Item(String email, int i) {
    }

    @GET
    @Produces(MediaType.APPLICATION_JSON)
    Item item(@QueryParam("email") String email, @QueryParam("i") int i);
}
