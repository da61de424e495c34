package bench.quarkus.virtual;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Base64;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import io.smallrye.jwt.build.Jwt;

/** Mints test tokens: well-formed ones with smallrye-jwt-build, odd ones by hand. */
final class Tokens {

    static final String SECRET = System.getenv().getOrDefault("JWT_SECRET",
            "this-is-the-default-benchmark-secret-of-at-least-256-bits");

    private Tokens() {
    }

    static String valid(String email) {
        return Jwt.claim("email", email).issuedAt(now()).expiresAt(now() + 300).signWithSecret(SECRET);
    }

    /** Same secret, HS512 (jose4j refuses a 456-bit key for HS512, so signed by hand). */
    static String hs512(String email) {
        return signed("{\"alg\":\"HS512\",\"typ\":\"JWT\"}", claims(email), "HmacSHA512");
    }

    static String hs384(String email) {
        return signed("{\"alg\":\"HS384\",\"typ\":\"JWT\"}", claims(email), "HmacSHA384");
    }

    static String wrongSecret(String email) {
        return Jwt.claim("email", email).issuedAt(now()).expiresAt(now() + 300)
                .signWithSecret("another-secret-another-secret-another-secret-0123456789");
    }

    /** An HS256 token over an arbitrary payload, signed with the right secret. */
    static String hs256(String payloadJson) {
        return signed("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payloadJson, "HmacSHA256");
    }

    /** A header claiming another algorithm, HMAC-SHA256 signature with the right secret. */
    static String withHeader(String headerJson, String payloadJson) {
        return signed(headerJson, payloadJson, "HmacSHA256");
    }

    static String algNone(String email) {
        return b64("{\"alg\":\"none\",\"typ\":\"JWT\"}") + "." + b64(claims(email)) + ".";
    }

    static String claims(String email) {
        return "{\"email\":\"" + email + "\",\"iat\":" + now() + ",\"exp\":" + (now() + 300) + "}";
    }

    static long now() {
        return Instant.now().getEpochSecond();
    }

    private static String signed(String headerJson, String payloadJson, String macAlg) {
        String input = b64(headerJson) + "." + b64(payloadJson);
        try {
            Mac mac = Mac.getInstance(macAlg);
            mac.init(new SecretKeySpec(SECRET.getBytes(StandardCharsets.UTF_8), macAlg));
            byte[] sig = mac.doFinal(input.getBytes(StandardCharsets.US_ASCII));
            return input + "." + Base64.getUrlEncoder().withoutPadding().encodeToString(sig);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static String b64(String json) {
        return Base64.getUrlEncoder().withoutPadding().encodeToString(json.getBytes(StandardCharsets.UTF_8));
    }
}
