select distinct u.id as user_id, count(*) as n, sum(o.total * 1.15) as gross
from users as u, orders as o
where (u.active = 1 or u.role in ('admin', 'owner'))
  and not o.status is null
  and u.email not like '%@example.com'
  and o.note <> 'it''s fine'
order by gross desc, user_id
limit 100 offset 20
