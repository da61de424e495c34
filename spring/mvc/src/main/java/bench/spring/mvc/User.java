package bench.spring.mvc;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;

@Entity
@Table(name = "users")
@JsonPropertyOrder({"email", "first", "last", "city", "county", "age"})
public class User {

    @Id
    private String email;
    private String first;
    private String last;
    private String city;
    private String county;
    private Integer age;

    protected User() {
    }

    public String getEmail() {
        return email;
    }

    public String getFirst() {
        return first;
    }

    public String getLast() {
        return last;
    }

    public String getCity() {
        return city;
    }

    public String getCounty() {
        return county;
    }

    public Integer getAge() {
        return age;
    }
}
