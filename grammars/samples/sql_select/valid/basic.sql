SELECT id, name FROM users WHERE age >= 18 AND country = 'NZ' ORDER BY name ASC LIMIT 10;
