package bench.spring.jdbc;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;

class FeedParametersTest {

    @ParameterizedTest(name = "[{0}] -> {1} {2}")
    @CsvSource(delimiter = '|', value = {
            "''|3|false", "calls=1|1|false", "calls=10|10|false", "calls=05&mode=sequential|5|true",
            "mode=parallel&calls=2|2|false", "queries=20|3|false"})
    void valid(String rawQuery, int calls, boolean sequential) {
        String[] error = new String[1];
        assertThat(FeedParameters.parse(rawQuery, error)).isEqualTo(new FeedParameters(calls, sequential));
    }

    @ParameterizedTest(name = "[{0}]")
    @ValueSource(strings = {"calls=0", "calls=11", "calls=-1", "calls=abc", "calls=", "calls", "calls=1.5",
            "calls=3&calls=3", "calls=%ZZ", "calls=99999999999"})
    void invalidCalls(String rawQuery) {
        String[] error = new String[1];
        assertThat(FeedParameters.parse(rawQuery, error)).isNull();
        assertThat(error[0]).isEqualTo(FeedParameters.INVALID_CALLS);
    }

    @ParameterizedTest(name = "[{0}]")
    @ValueSource(strings = {"mode=", "mode", "mode=bogus", "mode=SEQUENTIAL", "mode=sequential&mode=parallel"})
    void invalidMode(String rawQuery) {
        String[] error = new String[1];
        assertThat(FeedParameters.parse(rawQuery, error)).isNull();
        assertThat(error[0]).isEqualTo(FeedParameters.INVALID_MODE);
    }
}
