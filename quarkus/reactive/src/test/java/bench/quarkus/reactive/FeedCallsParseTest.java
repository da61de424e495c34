package bench.quarkus.reactive;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

/** {@code calls} of GET /feed: the grammar of {@code queries}, 1..10, default 3. */
class FeedCallsParseTest {

    private static int calls(List<String> values) {
        return Queries.parse(values, Queries.DEFAULT_CALLS, Queries.MAX_CALLS);
    }

    @Test
    void grammar() {
        assertEquals(3, calls(null));
        assertEquals(3, calls(List.of()));
        assertEquals(1, calls(List.of("1")));
        assertEquals(10, calls(List.of("10")));
        assertEquals(5, calls(List.of("05")));
        for (String bad : List.of("0", "11", "-1", "abc", "", "1.5", "+5", "99999999999")) {
            assertEquals(Queries.INVALID, calls(List.of(bad)), bad);
        }
        assertEquals(Queries.INVALID, calls(List.of("3", "3")));
    }
}
