package bench.quarkus.virtual;

import jakarta.json.JsonString;

import org.eclipse.microprofile.jwt.JsonWebToken;

import io.quarkus.security.AuthenticationFailedException;

/** The {@code email} claim, which must be a JSON string: a number is not coerced to text. */
final class EmailClaim {

    private EmailClaim() {
    }

    static String of(JsonWebToken jwt) {
        Object email = jwt.getClaim("email");
        if (email instanceof String s) {
            return s;
        }
        if (email instanceof JsonString s) {
            return s.getString();
        }
        throw new AuthenticationFailedException("email claim missing or not a string");
    }
}
