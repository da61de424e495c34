package bench.spring.mvc;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.test.context.ActiveProfiles;

import static org.assertj.core.api.Assertions.assertThat;

/** With the {@code virtual} profile (spring-virtual), each request runs on a virtual thread. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@Import(HandlingThreadRecorder.class)
@ActiveProfiles("virtual")
class VirtualThreadModelTest {

    @LocalServerPort
    int port;

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    HandlingThreadRecorder recorder;

    @Test
    void requestRunsOnAVirtualThread() throws Exception {
        Thread thread = recorder.handle(port, jdbc.queryForObject("SELECT email FROM users LIMIT 1", String.class));

        assertThat(thread.isVirtual()).as("%s is not virtual", thread).isTrue();
    }
}
