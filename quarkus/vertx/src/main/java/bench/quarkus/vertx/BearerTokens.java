package bench.quarkus.vertx;

import java.nio.charset.StandardCharsets;

import jakarta.inject.Singleton;

import org.eclipse.microprofile.config.inject.ConfigProperty;

import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.auth.PubSecKeyOptions;
import io.vertx.ext.auth.User;
import io.vertx.ext.auth.authentication.TokenCredentials;
import io.vertx.ext.auth.jwt.JWTAuth;
import io.vertx.ext.auth.jwt.JWTAuthOptions;

/** Verifies "Bearer <jwt>" with Vert.x auth-jwt (HS256 only) and extracts the email claim. */
@Singleton
public class BearerTokens {

    private static final String BEARER = "Bearer ";

    private final JWTAuth jwtAuth;

    BearerTokens(Vertx vertx, @ConfigProperty(name = "bench.jwt.secret") String secret) {
        // one key, HS256 only: a token signed with HS384/HS512 (even with this secret), "none" or
        // any other algorithm finds no key and fails
        this.jwtAuth = JWTAuth.create(vertx, new JWTAuthOptions().addPubSecKey(new PubSecKeyOptions()
                .setAlgorithm("HS256")
                .setBuffer(Buffer.buffer(secret.getBytes(StandardCharsets.UTF_8)))));
    }

    /**
     * The email claim of the token in an Authorization header value; a failed future when the
     * header, the token or its claims are not acceptable.
     */
    public Future<String> email(String authorization) {
        String token = bearerToken(authorization);
        if (token == null) {
            return Future.failedFuture("no bearer token");
        }
        Future<User> user;
        try {
            // signature, algorithm, and exp/iat/nbf when present (auth-jwt throws on a claim of the
            // wrong type: a failure too)
            user = jwtAuth.authenticate(new TokenCredentials(token));
        } catch (RuntimeException e) {
            return Future.failedFuture(e);
        }
        return user.compose(BearerTokens::emailClaim);
    }

    /** The token after a case-insensitive "Bearer " scheme, or null. */
    static String bearerToken(String authorization) {
        if (authorization == null || !authorization.regionMatches(true, 0, BEARER, 0, BEARER.length())) {
            return null;
        }
        String token = authorization.substring(BEARER.length()).trim();
        return token.isEmpty() ? null : token;
    }

    /** exp is required (auth-jwt checks it only when present); email must be a JSON string. */
    private static Future<String> emailClaim(User user) {
        JsonObject claims = user.attributes().getJsonObject("accessToken");
        if (claims != null && claims.getValue("exp") instanceof Number
                && claims.getValue("email") instanceof String email) {
            return Future.succeededFuture(email);
        }
        return Future.failedFuture("exp missing, or email missing or not a string");
    }
}
