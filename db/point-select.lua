-- The database's own ceiling: the ports' one query (primary-key SELECT of a random existing user),
-- prepared once per connection, run by sysbench at the ports' pool concurrency.
--   sysbench db/point-select.lua --users=build/users.tsv --threads=16 --time=20 --mysql-... run

sysbench.cmdline.options = {
  users = { "TSV of users (email first)", "build/users.tsv" },
}

local emails = {}

function thread_init()
  for line in io.lines(sysbench.opt.users) do
    emails[#emails + 1] = line:match("^[^\t]+")
  end
  drv = sysbench.sql.driver()
  con = drv:connect()
  stmt = con:prepare("SELECT email, first, last, city, county, age FROM users WHERE email = ?")
  email = stmt:bind_create(sysbench.sql.type.VARCHAR, 255)
  stmt:bind_param(email)
end

function event()
  email:set(emails[sysbench.rand.uniform(1, #emails)])
  stmt:execute()
end

function thread_done()
  stmt:close()
  con:disconnect()
end
