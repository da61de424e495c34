package bench.quarkus.reactive;

import java.util.Map;

import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.MediaType;

import org.jboss.resteasy.reactive.RestResponse;
import org.jboss.resteasy.reactive.server.ServerExceptionMapper;

import io.quarkus.security.AuthenticationFailedException;
import io.quarkus.security.UnauthorizedException;
import io.vertx.ext.web.RoutingContext;

/**
 * Every authentication failure (no token, bad token, unusable claims) answers
 * 401 {"error":"invalid_token"} with a Bearer challenge. Quarkus REST applies these mappers to
 * proactive-authentication failures too.
 */
public class AuthErrors {

    private static final Map<String, String> INVALID_TOKEN = Map.of("error", "invalid_token");

    @ServerExceptionMapper({ AuthenticationFailedException.class, UnauthorizedException.class })
    public RestResponse<Map<String, String>> unauthorized(RoutingContext rc) {
        // set, not add: on a proactive-authentication failure the JWT mechanism has already put
        // its own "WWW-Authenticate: Bearer" challenge on the response
        rc.response().headers().set(HttpHeaders.WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"");
        return RestResponse.ResponseBuilder.create(RestResponse.Status.UNAUTHORIZED, INVALID_TOKEN)
                .type(MediaType.APPLICATION_JSON_TYPE)
                .build();
    }
}
