package bench.spring.webflux;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

@SpringBootApplication
public class SpringWebfluxApplication {

    public static void main(String[] args) {
        // Reactor Netty sizes its event-loop group from the system property reactor.netty.ioWorkerCount
        // (default: available processors, at least 4), read once when its classes load. The default is kept;
        // REACTOR_NETTY_IO_WORKER_COUNT lets the same jar be measured with another size (a -D option wins).
        String ioWorkerCount = System.getenv("REACTOR_NETTY_IO_WORKER_COUNT");
        if (ioWorkerCount != null && !ioWorkerCount.isBlank() && System.getProperty("reactor.netty.ioWorkerCount") == null) {
            System.setProperty("reactor.netty.ioWorkerCount", ioWorkerCount.strip());
        }
        SpringApplication.run(SpringWebfluxApplication.class, args);
    }
}
