package bench.spring.jdbc;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Base64;
import java.util.Date;

import javax.crypto.Mac;
import javax.crypto.SecretKey;
import javax.crypto.spec.SecretKeySpec;

import io.jsonwebtoken.Jwts;
import io.jsonwebtoken.security.Keys;

/** Mints tokens for the tests: jjwt for valid ones, hand-made JSON for the hostile ones. */
final class TestTokens {

    static final String SECRET = "this-is-the-default-benchmark-secret-of-at-least-256-bits";
    static final SecretKey KEY = Keys.hmacShaKeyFor(SECRET.getBytes(StandardCharsets.UTF_8));

    private TestTokens() {
    }

    static String valid(String email) {
        Instant now = Instant.now();
        return Jwts.builder()
                .claim("email", email)
                .issuedAt(Date.from(now))
                .expiration(Date.from(now.plus(1, ChronoUnit.HOURS)))
                .signWith(KEY, Jwts.SIG.HS256)
                .compact();
    }

    /** A token with the given raw header and payload JSON, HMAC-signed with the shared secret. */
    static String hmac(String jcaAlgorithm, String headerJson, String payloadJson) {
        String signingInput = b64(headerJson.getBytes(StandardCharsets.UTF_8)) + "."
                + b64(payloadJson.getBytes(StandardCharsets.UTF_8));
        try {
            Mac mac = Mac.getInstance(jcaAlgorithm);
            mac.init(new SecretKeySpec(SECRET.getBytes(StandardCharsets.UTF_8), jcaAlgorithm));
            return signingInput + "." + b64(mac.doFinal(signingInput.getBytes(StandardCharsets.US_ASCII)));
        }
        catch (Exception ex) {
            throw new IllegalStateException(ex);
        }
    }

    static String hs256(String payloadJson) {
        return hmac("HmacSHA256", "{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payloadJson);
    }

    static String claims(String emailJson, long expOffsetSeconds) {
        long now = Instant.now().getEpochSecond();
        return "{\"email\":" + emailJson + ",\"iat\":" + now + ",\"exp\":" + (now + expOffsetSeconds) + "}";
    }

    static String b64(byte[] bytes) {
        return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    }
}
