package bench.spring.jdbc;

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
        return parse(rawQuery, NAME, DEFAULT, MAX);
    }

    /** The same grammar for another count parameter ({@code calls} of {@code GET /feed}): 1..max, or INVALID. */
    static int parse(String rawQuery, String name, int defaultValue, int max) {
        String value = value(rawQuery, name);
        if (value == null) {
            return defaultValue;
        }
        if (value == REPEATED_OR_MALFORMED) {
            return INVALID;
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
        return n >= MIN && n <= max ? n : INVALID;
    }

    /** A sentinel (compared by identity) for a parameter given twice or with malformed percent-encoding. */
    static final String REPEATED_OR_MALFORMED = new String("\u0000invalid");

    /** The decoded value of parameter {@code name}: null when absent, "" for {@code ?name} or {@code ?name=},
     * {@link #REPEATED_OR_MALFORMED} when repeated or not decodable. */
    static String value(String rawQuery, String name) {
        if (rawQuery == null || rawQuery.isEmpty()) {
            return null;
        }
        String value = null;
        for (String pair : rawQuery.split("&", -1)) {
            int eq = pair.indexOf('=');
            if (!name.equals(decode(eq < 0 ? pair : pair.substring(0, eq)))) {
                continue;
            }
            if (value != null) {
                return REPEATED_OR_MALFORMED;
            }
            value = eq < 0 ? "" : decode(pair.substring(eq + 1));
            if (value == null) {
                return REPEATED_OR_MALFORMED;
            }
        }
        return value;
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
