package bench.quarkus.reactive;

/** Response body: a record serializes its components in declaration order. */
public record UserJson(String email, String first, String last, String city, String county, Integer age) {

    static UserJson of(User u) {
        return new UserJson(u.email, u.first, u.last, u.city, u.county, u.age);
    }
}
