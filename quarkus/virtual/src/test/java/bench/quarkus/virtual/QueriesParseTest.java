package bench.quarkus.virtual;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

class QueriesParseTest {

    @Test
    void grammar() {
        assertEquals(1, Queries.parse(null));
        assertEquals(1, Queries.parse(List.of()));
        assertEquals(1, Queries.parse(List.of("1")));
        assertEquals(7, Queries.parse(List.of("007")));
        assertEquals(20, Queries.parse(List.of("20")));
        assertEquals(5, Queries.parse(List.of("000000005")));
        assertEquals(Queries.INVALID, Queries.parse(List.of("0000000005")));
        for (String bad : QueriesTest.INVALID) {
            assertEquals(Queries.INVALID, Queries.parse(List.of(bad)), bad);
        }
        assertEquals(Queries.INVALID, Queries.parse(List.of("2", "2")));
        assertEquals(Queries.INVALID, Queries.parse(Arrays.asList((String) null)));
    }
}
