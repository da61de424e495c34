package bench.quarkus.reactive;

import io.quarkus.hibernate.reactive.panache.PanacheEntityBase;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;

/** Row of the existing {@code users} table (the schema is never created nor altered). */
@Entity
@Table(name = "users")
public class User extends PanacheEntityBase {

    @Id
    public String email;
    public String first;
    public String last;
    public String city;
    public String county;
    public Integer age;
}
