package bench.spring.jdbc;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;

/** Starts the app on a random port and tells which thread handled a real request for a real user. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@Import(HandlingThreadRecorder.class)
abstract class ThreadModelTest {

    @LocalServerPort
    int port;

    @Autowired
    JdbcTemplate jdbc;

    @Autowired
    HandlingThreadRecorder recorder;

    Thread handlingThread() throws Exception {
        return recorder.handle(port, jdbc.queryForObject("SELECT email FROM users LIMIT 1", String.class));
    }
}
