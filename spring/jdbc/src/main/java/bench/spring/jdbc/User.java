package bench.spring.jdbc;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;

/** A row of {@code users}, as JSON in the contract's key order. */
@JsonPropertyOrder({"email", "first", "last", "city", "county", "age"})
public record User(String email, String first, String last, String city, String county, Integer age) {
}
