package bench.quarkus.reactive;

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
        return parse(values, 1, MAX);
    }

    /** The same grammar for another count parameter ({@code calls} of {@code GET /feed}): 1..max, or INVALID. */
    static int parse(List<String> values, int defaultValue, int max) {
        if (values == null || values.isEmpty()) {
            return defaultValue;
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
        return n >= 1 && n <= max ? n : INVALID;
    }

    static final int DEFAULT_CALLS = 3;
    static final int MAX_CALLS = 10;
    /** {@code mode} of {@code GET /feed}: absent or "parallel". */
    static final int PARALLEL = 0;
    /** {@code mode=sequential}. */
    static final int SEQUENTIAL = 1;

    /** {@code calls} of {@code GET /feed} (1..10, default 3), or {@link #INVALID}. */
    static int calls(HttpServerRequest request) {
        try {
            return parse(request.params().getAll("calls"), DEFAULT_CALLS, MAX_CALLS);
        } catch (RuntimeException e) { // a query string that cannot be decoded
            return INVALID;
        }
    }

    /** {@code mode} of {@code GET /feed}: {@link #PARALLEL}, {@link #SEQUENTIAL} or {@link #INVALID}. */
    static int mode(HttpServerRequest request) {
        List<String> values;
        try {
            values = request.params().getAll("mode");
        } catch (RuntimeException e) {
            return INVALID;
        }
        if (values == null || values.isEmpty()) {
            return PARALLEL;
        }
        if (values.size() != 1) {
            return INVALID;
        }
        return switch (values.get(0)) {
            case "parallel" -> PARALLEL;
            case "sequential" -> SEQUENTIAL;
            default -> INVALID;
        };
    }
}
