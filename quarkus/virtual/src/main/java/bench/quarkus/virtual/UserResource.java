package bench.quarkus.virtual;

import java.util.Map;

import jakarta.inject.Inject;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;

import org.eclipse.microprofile.jwt.JsonWebToken;
import org.jboss.resteasy.reactive.RestResponse;

import io.quarkus.security.Authenticated;
import io.smallrye.common.annotation.RunOnVirtualThread;

@Path("/")
@Authenticated
public class UserResource {

    private static final Map<String, String> NOT_FOUND = Map.of("error", "not_found");

    @Inject
    JsonWebToken jwt;

    @GET
    @Produces(MediaType.APPLICATION_JSON)
    @RunOnVirtualThread
    public RestResponse<?> user() {
        User user = User.findById(EmailClaim.of(jwt));
        return user == null
                ? RestResponse.status(RestResponse.Status.NOT_FOUND, NOT_FOUND)
                : RestResponse.ok(UserJson.of(user));
    }
}
