package bench.spring.mvc;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.data.jpa.repository.config.EnableJpaRepositories;

@SpringBootApplication
// The lookup is a single read: run it without a transaction, so findById costs exactly one
// statement (no SET autocommit / SET SESSION TRANSACTION READ ONLY / COMMIT round trips).
@EnableJpaRepositories(enableDefaultTransactions = false)
public class SpringMvcApplication {

    public static void main(String[] args) {
        SpringApplication.run(SpringMvcApplication.class, args);
    }
}
