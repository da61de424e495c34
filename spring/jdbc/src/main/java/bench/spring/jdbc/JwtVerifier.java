package bench.spring.jdbc;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

import io.jsonwebtoken.Claims;
import io.jsonwebtoken.Jws;
import io.jsonwebtoken.JwtException;
import io.jsonwebtoken.JwtParser;
import io.jsonwebtoken.Jwts;
import io.jsonwebtoken.security.Keys;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Component;

/**
 * Verifies {@code Authorization: Bearer <jwt>}: HS256 only, signed with {@code JWT_SECRET},
 * {@code exp} required, {@code nbf} enforced when present, {@code email} must be a JSON string.
 */
@Component
public class JwtVerifier {

    private static final String BEARER = "Bearer ";

    private final JwtParser parser;

    public JwtVerifier(@Value("${jwt.secret}") String secret,
                       @Value("${jwt.clock-skew-seconds:30}") long clockSkewSeconds) {
        this.parser = Jwts.parser()
                .verifyWith(Keys.hmacShaKeyFor(secret.getBytes(StandardCharsets.UTF_8)))
                // Pin the algorithm: with only HS256 registered, HS384/HS512/RS256/none are rejected.
                .sig().clear().add(Jwts.SIG.HS256).and()
                .clockSkewSeconds(clockSkewSeconds)
                .build();
    }

    /** The verified {@code email} claim, or empty when the header does not carry a valid token. */
    public Optional<String> email(String authorization) {
        if (authorization == null || !authorization.regionMatches(true, 0, BEARER, 0, BEARER.length())) {
            return Optional.empty();
        }
        String token = authorization.substring(BEARER.length()).strip();
        if (token.isEmpty()) {
            return Optional.empty();
        }
        try {
            Jws<Claims> jws = parser.parseSignedClaims(token);
            if (!Jwts.SIG.HS256.getId().equals(jws.getHeader().getAlgorithm())) {
                return Optional.empty();
            }
            Claims claims = jws.getPayload();
            // exp is optional in RFC 7519 (jjwt enforces it only when present): require it here.
            if (claims.getExpiration() == null) {
                return Optional.empty();
            }
            // Read the raw value: a coercing getter would turn a numeric email into a string.
            return claims.get("email") instanceof String email ? Optional.of(email) : Optional.empty();
        }
        catch (JwtException | IllegalArgumentException ex) {
            return Optional.empty();
        }
    }
}
