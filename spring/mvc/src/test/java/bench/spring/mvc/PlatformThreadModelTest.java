package bench.spring.mvc;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.ActiveProfiles;

import static org.assertj.core.api.Assertions.assertThat;

/** With the {@code platform} profile (spring-platform), requests run on Tomcat's platform worker threads. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@Import(HandlingThreadRecorder.class)
@ActiveProfiles("platform")
class PlatformThreadModelTest {

    @LocalServerPort
    int port;

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    HandlingThreadRecorder recorder;

    @Test
    void requestRunsOnAPlatformTomcatWorker() throws Exception {
        Thread thread = recorder.handle(port, jdbc.queryForObject("SELECT email FROM users LIMIT 1", String.class));

        assertThat(thread.isVirtual()).as("%s is virtual", thread).isFalse();
        assertThat(thread.getName()).startsWith("http-nio-").contains("-exec-");
    }
}
