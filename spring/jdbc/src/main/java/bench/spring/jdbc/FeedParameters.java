package bench.spring.jdbc;

/**
 * The query parameters of {@code GET /feed}: {@code calls} (1..10, default 3) and {@code mode}
 * ({@code parallel}, the default, or {@code sequential}). Read from the raw query string with the same grammar
 * as {@code queries} on {@code GET /} (one value, ASCII digits only, repeated or malformed refused).
 */
record FeedParameters(int calls, boolean sequential) {

    static final int DEFAULT_CALLS = 3;
    static final int MAX_CALLS = 10;
    static final String INVALID_CALLS = "invalid_calls";
    static final String INVALID_MODE = "invalid_mode";

    /** The parameters, or null with {@code error[0]} set to the error code. */
    static FeedParameters parse(String rawQuery, String[] error) {
        int calls = QueriesParameter.parse(rawQuery, "calls", DEFAULT_CALLS, MAX_CALLS);
        if (calls == QueriesParameter.INVALID) {
            error[0] = INVALID_CALLS;
            return null;
        }
        String mode = QueriesParameter.value(rawQuery, "mode");
        if (mode == null) {
            return new FeedParameters(calls, false);
        }
        return switch (mode) {
            case "parallel" -> new FeedParameters(calls, false);
            case "sequential" -> new FeedParameters(calls, true);
            default -> {
                error[0] = INVALID_MODE;
                yield null;
            }
        };
    }
}
