package bench.quarkus.virtual;

import java.util.List;

import io.vertx.core.http.HttpServerRequest;

/**
 * The {@code queries} request parameter: how many lookups of the token's user one request runs, one after
 * the other. Absent: 1. Otherwise exactly one value of ASCII digits only (no sign, no spaces, no decimals;
 * leading zeros allowed, at most 9 digits) between 1 and {@value #MAX}; anything else (empty, not an
 * integer, out of range, repeated) is invalid. Read from the Vert.x request's query parameters, where a
 * name without a value ({@code ?queries}) is an empty value, as {@code ?queries=} is.
 */
final class Queries {

    static final int MAX = 20;
    static final int INVALID = -1;

    private Queries() {
    }

    /** The number of lookups the request asks for, or {@link #INVALID}. */
    static int of(HttpServerRequest request) {
        try {
            return parse(request.params().getAll("queries"));
        } catch (RuntimeException e) { // a query string that cannot be decoded
            return INVALID;
        }
    }

    /** The number of lookups, or {@link #INVALID}. */
    static int parse(List<String> values) {
        if (values == null || values.isEmpty()) {
            return 1;
        }
        if (values.size() != 1) {
            return INVALID;
        }
        String value = values.get(0);
        // at most 9 digits (as the Spring ports' parser): no overflow, and "0000000005" is refused everywhere
        if (value == null || value.isEmpty() || value.length() > 9) {
            return INVALID;
        }
        int n = 0;
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c < '0' || c > '9') {
                return INVALID;
            }
            n = n * 10 + (c - '0');
        }
        return n >= 1 && n <= MAX ? n : INVALID;
    }
}
