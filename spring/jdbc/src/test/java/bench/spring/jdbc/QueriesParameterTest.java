package bench.spring.jdbc;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;

class QueriesParameterTest {

    @ParameterizedTest(name = "[{0}] -> {1}")
    @CsvSource(delimiter = '|', value = {
            "''|1", "other=3|1", "queries=1|1", "queries=20|20", "queries=7&other=x|7", "a=1&queries=05|5",
            "queries=%31%32|12", "%71ueries=3|3", "foo=%ZZ&queries=2|2"})
    void valid(String rawQuery, int expected) {
        assertThat(QueriesParameter.parse(rawQuery)).isEqualTo(expected);
    }

    @ParameterizedTest(name = "[{0}]")
    @ValueSource(strings = {"queries=0", "queries=21", "queries=-1", "queries=abc", "queries=1.5", "queries=",
            "queries", "queries=+5", "queries=%2B5", "queries=%205", "queries=5&queries=5", "queries=1&queries=",
            "queries=%ZZ", "queries=99999999999", "queries=1e1", "queries=0x10", "queries=２"})
    void invalid(String rawQuery) {
        assertThat(QueriesParameter.parse(rawQuery)).isEqualTo(QueriesParameter.INVALID);
    }
}
