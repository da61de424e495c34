package bench.spring.webflux;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;

import org.springframework.data.annotation.Id;
import org.springframework.data.relational.core.mapping.Table;

@Table("users")
@JsonPropertyOrder({"email", "first", "last", "city", "county", "age"})
public record User(@Id String email, String first, String last, String city, String county, Integer age) {
}
