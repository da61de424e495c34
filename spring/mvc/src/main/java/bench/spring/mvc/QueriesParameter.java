package bench.spring.mvc;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;

/**
 * The optional {@code queries} parameter of {@code GET /}: how many lookups of the token's user one
 * request makes, one after another. Read from the raw query string, so that a repeated or malformed
 * parameter is refused instead of being silently merged or dropped by the container.
 */
final class QueriesParameter {

    static final int DEFAULT = 1;
    static final int MIN = 1;
    static final int MAX = 20;
    /** Returned for a value that is not a decimal integer in [MIN, MAX], empty, or repeated. */
    static final int INVALID = -1;

    private static final String NAME = "queries";

    private QueriesParameter() {
    }

    /** {@link #DEFAULT} when absent, the number when it is ASCII digits within [MIN, MAX], else {@link #INVALID}. */
    static int parse(String rawQuery) {
        if (rawQuery == null || rawQuery.isEmpty()) {
            return DEFAULT;
        }
        String value = null;
        for (String pair : rawQuery.split("&", -1)) {
            int eq = pair.indexOf('=');
            if (!NAME.equals(decode(eq < 0 ? pair : pair.substring(0, eq)))) {
                continue;
            }
            if (value != null) {
                return INVALID; // repeated
            }
            value = eq < 0 ? "" : decode(pair.substring(eq + 1));
            if (value == null) {
                return INVALID; // malformed percent-encoding
            }
        }
        if (value == null) {
            return DEFAULT;
        }
        if (value.isEmpty() || value.length() > 9) {
            return INVALID;
        }
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c < '0' || c > '9') {
                return INVALID; // no sign, no spaces, no decimals
            }
        }
        int n = Integer.parseInt(value);
        return n >= MIN && n <= MAX ? n : INVALID;
    }

    private static String decode(String raw) {
        try {
            return URLDecoder.decode(raw, StandardCharsets.UTF_8);
        }
        catch (IllegalArgumentException ex) {
            return null;
        }
    }
}
