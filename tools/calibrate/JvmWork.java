import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The calibration's JVM workload (issue 34, item 7): the endpoint's own CPU work, in-process, on one warmed thread.
 * Per operation: verify an HS256 token shaped like the benchmark's (Base64url, HMAC-SHA256, a constant-time compare),
 * read its email claim from the JSON payload, and write a user row as JSON. JDK code only, so it runs from source
 * (`java JvmWork.java WARMUP_MS WINDOW_MS WINDOWS`) with no build; it prints one JSON line: µs per operation per
 * window. sysbench's prime loop did not predict the ports' JVM work across machines (-41 % to +147 %); this is
 * the kind of work they do.
 */
public class JvmWork {

    static final byte[] SECRET = "this-is-the-default-benchmark-secret-of-at-least-256-bits".getBytes(StandardCharsets.UTF_8);
    static final Base64.Encoder B64 = Base64.getUrlEncoder().withoutPadding();
    static final Base64.Decoder D64 = Base64.getUrlDecoder();
    static long sink;

    public static void main(String[] args) throws Exception {
        long warmupMs = Long.parseLong(args[0]), windowMs = Long.parseLong(args[1]);
        int windows = Integer.parseInt(args[2]);
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(SECRET, "HmacSHA256"));
        String[] tokens = new String[256];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = token(mac, "user" + i + "@example.com", 1_900_000_000L + i);
        }
        run(mac, tokens, warmupMs);
        StringBuilder out = new StringBuilder("{\"us_per_op\": [");
        for (int w = 0; w < windows; w++) {
            long began = System.nanoTime();
            long ops = run(mac, tokens, windowMs);
            out.append(w == 0 ? "" : ", ").append(String.format("%.3f", (System.nanoTime() - began) / 1e3 / ops));
        }
        System.out.println(out.append("], \"sink\": ").append(sink % 10).append("}"));
    }

    static String token(Mac mac, String email, long exp) {
        String header = B64.encodeToString("{\"alg\":\"HS256\",\"typ\":\"JWT\"}".getBytes(StandardCharsets.UTF_8));
        String payload = B64.encodeToString(("{\"sub\":\"" + email + "\",\"email\":\"" + email + "\",\"iat\":1700000000,"
                + "\"exp\":" + exp + "}").getBytes(StandardCharsets.UTF_8));
        String signed = header + "." + payload;
        return signed + "." + B64.encodeToString(mac.doFinal(signed.getBytes(StandardCharsets.US_ASCII)));
    }

    /** Operations until `ms` have passed (the clock read every 64). */
    static long run(Mac mac, String[] tokens, long ms) {
        long until = System.nanoTime() + ms * 1_000_000L, ops = 0;
        while (true) {
            for (int i = 0; i < 64; i++, ops++) {
                String email = verify(mac, tokens[(int) (ops & (tokens.length - 1))]);
                sink += row(email, ops).length();
            }
            if (System.nanoTime() >= until) {
                return ops;
            }
        }
    }

    static String verify(Mac mac, String token) {
        int a = token.indexOf('.'), b = token.lastIndexOf('.');
        byte[] expected = mac.doFinal(token.substring(0, b).getBytes(StandardCharsets.US_ASCII));
        if (!MessageDigest.isEqual(expected, D64.decode(token.substring(b + 1)))) {
            throw new IllegalStateException("bad signature");
        }
        String payload = new String(D64.decode(token.substring(a + 1, b)), StandardCharsets.UTF_8);
        int at = payload.indexOf("\"email\":\"") + 9;
        return payload.substring(at, payload.indexOf('"', at));
    }

    static String row(String email, long id) {
        StringBuilder json = new StringBuilder(160).append("{\"id\":").append(id).append(",\"email\":\"");
        for (int i = 0; i < email.length(); i++) {
            char c = email.charAt(i);
            if (c == '"' || c == '\\') {
                json.append('\\');
            }
            json.append(c);
        }
        return json.append("\",\"name\":\"User ").append(id).append("\",\"created_at\":\"2024-01-01T00:00:00Z\"}")
                .toString();
    }
}
